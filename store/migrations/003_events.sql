-- 003: the progress of a job as a durable, sequenced stream of events, so a
-- page or a GitHub comment in another process can follow a running job and
-- pick up where it left off.
--
-- job_id is the producer's name for the run (a queue job's id as text, a
-- bisection's id); kind and payload are the producer's typed event, opaque
-- to the store like the other jsonb payloads.
CREATE TABLE job_events (
	job_id  text NOT NULL CHECK (job_id <> ''),
	seq     bigint NOT NULL CHECK (seq > 0),
	at      timestamptz NOT NULL DEFAULT now(),
	kind    text NOT NULL CHECK (kind <> ''),
	payload jsonb NOT NULL DEFAULT '{}',
	PRIMARY KEY (job_id, seq)
);

-- The last sequence number given out per job. Appenders take the next one
-- with an upsert that holds this row's lock until they commit, so the
-- events of one job commit in sequence order with no gaps, and a number is
-- never given out twice even after the job's events are deleted.
CREATE TABLE job_event_seqs (
	job_id   text PRIMARY KEY,
	last_seq bigint NOT NULL
);
