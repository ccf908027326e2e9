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
	ratio        double precision,
	ratio_low    double precision,
	ratio_high   double precision,
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

-- What the bot found. id is the finding's own name (notify.NewID) and
-- report the whole finding as package notify writes it; the other columns
-- are a summary for queries. A finding is pending until it is settled.
CREATE TABLE findings (
	id           text PRIMARY KEY,
	kind         text NOT NULL CHECK (kind <> ''),
	branch       text NOT NULL DEFAULT '',
	bisection_id text,
	culprits     text[] NOT NULL DEFAULT '{}',
	scenario     text NOT NULL DEFAULT '',
	point        text NOT NULL DEFAULT '',
	metric       text NOT NULL DEFAULT '',
	ratio        double precision,
	ratio_low    double precision,
	ratio_high   double precision,
	p            double precision,
	n            integer NOT NULL DEFAULT 0,
	report       jsonb NOT NULL DEFAULT '{}',
	created_at   timestamptz NOT NULL DEFAULT now(),
	settled_at   timestamptz
);
CREATE INDEX findings_pending ON findings (created_at) WHERE settled_at IS NULL;

-- Where and when a finding was posted: one row per target (an issue per
-- culprit), including targets deliberately skipped.
CREATE TABLE posts (
	id           bigserial PRIMARY KEY,
	finding_id   text NOT NULL REFERENCES findings (id) ON DELETE CASCADE,
	target       text NOT NULL DEFAULT '',
	action       text NOT NULL DEFAULT '',
	repo         text NOT NULL DEFAULT '',
	issue_number integer NOT NULL DEFAULT 0,
	comment_id   bigint NOT NULL DEFAULT 0,
	url          text NOT NULL DEFAULT '',
	note         text NOT NULL DEFAULT '',
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
