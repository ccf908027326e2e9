-- 001: the initial results schema.
--
-- Payloads owned by other packages (build options, environments, bisection
-- state, comparison details, reports) are jsonb that the store never looks
-- inside, so those packages can change their types without a migration.

-- The machines and settings results were measured on. Identical environments
-- share one row: fingerprint is the md5 of the normalised jsonb text.
CREATE TABLE environments (
	id          bigserial PRIMARY KEY,
	fingerprint text NOT NULL UNIQUE,
	info        jsonb NOT NULL,
	created_at  timestamptz NOT NULL DEFAULT now()
);

-- One row per build cache key (commit + build options). A rebuild of the same
-- key replaces the row.
CREATE TABLE builds (
	key        text PRIMARY KEY,
	commit     text NOT NULL,
	options    jsonb NOT NULL DEFAULT '{}',
	status     text NOT NULL CHECK (status <> ''),
	log_path   text NOT NULL DEFAULT '',
	duration   interval NOT NULL DEFAULT '0',
	error      text NOT NULL DEFAULT '',
	built_at   timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX builds_commit ON builds (commit);

-- Nightly passes over a branch.
CREATE TABLE nightly_runs (
	id          bigserial PRIMARY KEY,
	branch      text NOT NULL,
	commit      text NOT NULL,
	status      text NOT NULL CHECK (status <> ''),
	detail      jsonb NOT NULL DEFAULT '{}',
	started_at  timestamptz NOT NULL DEFAULT now(),
	finished_at timestamptz
);
CREATE INDEX nightly_runs_branch ON nightly_runs (branch, started_at DESC, id DESC);

-- One value of one metric from one workload run on a fresh server: the unit
-- of replication. nightly_id ties a sample to the nightly pass that took it,
-- which is what the change-point series is made of.
CREATE TABLE samples (
	id             bigserial PRIMARY KEY,
	build_key      text NOT NULL,
	commit         text NOT NULL,
	scenario       text NOT NULL,
	point          text NOT NULL DEFAULT '',
	metric         text NOT NULL,
	value          double precision NOT NULL,
	sample_index   integer NOT NULL,
	taken_at       timestamptz NOT NULL DEFAULT now(),
	environment_id bigint REFERENCES environments (id),
	nightly_id     bigint REFERENCES nightly_runs (id) ON DELETE SET NULL
);
CREATE INDEX samples_series ON samples (scenario, metric, point, build_key);
CREATE INDEX samples_nightly ON samples (nightly_id) WHERE nightly_id IS NOT NULL;

-- A verdict on two builds for one scenario, point and metric.
CREATE TABLE comparisons (
	id           bigserial PRIMARY KEY,
	scenario     text NOT NULL,
	point        text NOT NULL DEFAULT '',
	metric       text NOT NULL,
	base_key     text NOT NULL,
	head_key     text NOT NULL,
	verdict      text NOT NULL CHECK (verdict <> ''),
	effect       double precision,
	ci_low       double precision,
	ci_high      double precision,
	p            double precision,
	n_base       integer NOT NULL DEFAULT 0,
	n_head       integer NOT NULL DEFAULT 0,
	detail       jsonb NOT NULL DEFAULT '{}',
	bisection_id text,
	nightly_id   bigint REFERENCES nightly_runs (id) ON DELETE SET NULL,
	created_at   timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX comparisons_builds ON comparisons (base_key, head_key);

-- A bisection's whole resumable state, owned by package bisect.
CREATE TABLE bisections (
	id         text PRIMARY KEY,
	status     text NOT NULL CHECK (status <> ''),
	state      jsonb NOT NULL,
	created_at timestamptz NOT NULL DEFAULT now(),
	updated_at timestamptz NOT NULL DEFAULT now()
);

-- What the bot found. key is chosen by the caller (for example culprit,
-- scenario, point and metric) so that saving the same finding twice keeps
-- one row.
CREATE TABLE findings (
	id           bigserial PRIMARY KEY,
	key          text NOT NULL UNIQUE,
	kind         text NOT NULL DEFAULT 'regression',
	bisection_id text,
	culprit      text NOT NULL DEFAULT '',
	scenario     text NOT NULL DEFAULT '',
	point        text NOT NULL DEFAULT '',
	metric       text NOT NULL DEFAULT '',
	effect       double precision,
	ci_low       double precision,
	ci_high      double precision,
	p            double precision,
	n            integer NOT NULL DEFAULT 0,
	title        text NOT NULL,
	report       jsonb NOT NULL DEFAULT '{}',
	created_at   timestamptz NOT NULL DEFAULT now()
);

-- Where and when a finding was posted. A finding without a post is pending.
CREATE TABLE posts (
	id           bigserial PRIMARY KEY,
	finding_id   bigint NOT NULL REFERENCES findings (id) ON DELETE CASCADE,
	repo         text NOT NULL,
	issue_number integer NOT NULL,
	comment_id   bigint NOT NULL DEFAULT 0,
	url          text NOT NULL DEFAULT '',
	posted_at    timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX posts_finding ON posts (finding_id);

-- On-demand work for the daemon. Claimed with FOR UPDATE SKIP LOCKED so two
-- daemons never take the same job.
CREATE TABLE jobs (
	id          bigserial PRIMARY KEY,
	kind        text NOT NULL CHECK (kind <> ''),
	args        jsonb NOT NULL DEFAULT '{}',
	status      text NOT NULL DEFAULT 'queued'
	            CHECK (status IN ('queued', 'running', 'done', 'failed')),
	error       text NOT NULL DEFAULT '',
	worker      text NOT NULL DEFAULT '',
	progress    text NOT NULL DEFAULT '',
	attempts    integer NOT NULL DEFAULT 0,
	created_at  timestamptz NOT NULL DEFAULT now(),
	started_at  timestamptz,
	finished_at timestamptz
);
CREATE INDEX jobs_queued ON jobs (id) WHERE status = 'queued';
