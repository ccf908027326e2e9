-- 004: leases of running jobs, with fencing (issue 13).
--
-- A job runs on the machine holding its lease. The lease expires by the
-- database's clock unless renewed; another worker of the class may then
-- take the job over, which bumps the epoch. Every write a job makes checks
-- its epoch in the same transaction (store.CheckLease), so a worker that
-- was paused or cut off past its lease has its writes refused.
CREATE TABLE job_leases (
	job_id     text PRIMARY KEY CHECK (job_id <> ''),
	machine    text NOT NULL,
	class      text NOT NULL DEFAULT '',
	epoch      bigint NOT NULL CHECK (epoch > 0),
	expires_at timestamptz NOT NULL,
	taken_at   timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX job_leases_expiry ON job_leases (expires_at);
