-- 006: several machines on one results database (issue 13).
--
-- Jobs run on River (river_job, migrated by rivermigrate). The jobs table
-- of the home-made queue is kept as history: pgbisect moves its queued and
-- running rows into River at startup and marks them 'moved', with the River
-- job that carries them on.
ALTER TABLE jobs DROP CONSTRAINT jobs_status_check;
ALTER TABLE jobs ADD CONSTRAINT jobs_status_check CHECK (status IN ('queued', 'running', 'done', 'failed', 'moved'));
ALTER TABLE jobs ADD COLUMN river_id bigint;

-- Machines that joined with 'pgbisect daemon': their class (the River queue
-- they take jobs from), their last heartbeat and the job they run.
CREATE TABLE machines (
	name         text PRIMARY KEY CHECK (name <> ''),
	class        text NOT NULL,
	pid          integer NOT NULL DEFAULT 0,
	started_at   timestamptz NOT NULL DEFAULT now(),
	heartbeat_at timestamptz NOT NULL DEFAULT now(),
	job_key      text NOT NULL DEFAULT '',
	stopped_at   timestamptz
);

-- The machine a sample was measured on and an environment was seen on
-- ('' before this migration, and for measurements outside a daemon job
-- unless the store was given a machine).
ALTER TABLE samples ADD COLUMN machine text NOT NULL DEFAULT '';
ALTER TABLE samples ADD COLUMN machine_class text NOT NULL DEFAULT '';
ALTER TABLE environments ADD COLUMN machine text NOT NULL DEFAULT '';

-- Nightly runs are per machine class: series, night-to-night comparisons
-- and change points never mix classes. '' is the one-machine default (and
-- the class named 'default').
ALTER TABLE nightly_runs ADD COLUMN machine_class text NOT NULL DEFAULT '';
CREATE INDEX nightly_runs_class ON nightly_runs (branch, machine_class, started_at);
