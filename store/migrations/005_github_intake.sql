-- 005: requests read from GitHub comments (issue 15).

-- The ETag and body of the last answer to each GET the bot made, so the
-- next poll asks "has it changed?" and an unchanged answer (304) costs no
-- rate limit, also after a restart.
CREATE TABLE github_etags (
	key        text PRIMARY KEY,
	etag       text NOT NULL,
	body       bytea NOT NULL,
	updated_at timestamptz NOT NULL DEFAULT now()
);

-- How far the bot has read each repository's comments (their update time).
CREATE TABLE github_cursors (
	repo  text PRIMARY KEY,
	since timestamptz NOT NULL
);

-- Every command the bot acted on, once: a comment polled twice, delivered
-- twice by a webhook, or edited keeps its row, so it is never acted on
-- again. job_id is the job it queued (NULL for an answer only: a refusal,
-- a mistake, status). Written in the transaction that queues the job.
CREATE TABLE github_commands (
	comment_id bigint NOT NULL,
	line_no    integer NOT NULL,
	repo       text NOT NULL,
	issue      integer NOT NULL,
	login      text NOT NULL,
	command    text NOT NULL,
	job_id     text,
	outcome    text NOT NULL,
	at         timestamptz NOT NULL DEFAULT now(),
	PRIMARY KEY (comment_id, line_no)
);
CREATE INDEX github_commands_by_login ON github_commands (login, at) WHERE job_id IS NOT NULL;

-- Webhook deliveries seen, so a replayed delivery does nothing.
CREATE TABLE github_deliveries (
	delivery_id text PRIMARY KEY,
	at          timestamptz NOT NULL DEFAULT now()
);
