-- 008: answers to GitHub commands as their jobs run (issue 15, item 5).
--
-- A queued command's reply comment is edited at the job's milestones,
-- read from its events stream (events.job_id = github_commands.events),
-- wherever the job runs; progress_seq is the last event read and progress
-- the milestone lines already shown, so a restarted bot neither repeats an
-- edit nor loses one. When the job ends, its finding is posted in the
-- thread once (final_id, found again by its marker after a crash) and the
-- row is closed.
ALTER TABLE github_commands
	ADD COLUMN events       text,
	ADD COLUMN reply_id     bigint,
	ADD COLUMN reply        text NOT NULL DEFAULT '',
	ADD COLUMN progress_seq bigint NOT NULL DEFAULT 0,
	ADD COLUMN progress     text NOT NULL DEFAULT '',
	ADD COLUMN final_id     bigint,
	ADD COLUMN closed_at    timestamptz;
CREATE INDEX github_commands_open ON github_commands (repo, at) WHERE job_id IS NOT NULL AND closed_at IS NULL;
