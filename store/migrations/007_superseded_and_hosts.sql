-- 007: a bisection's samples carry its sample clock, and those no
-- comparison uses any more are marked superseded (issue 13): a comparison
-- in flight when its job moved to another machine restarts there, and a
-- sample stored by a process that died before it saved the state is taken
-- again. Superseded samples are kept, never used in a decision.
ALTER TABLE samples ADD COLUMN bisection_seq integer;
ALTER TABLE samples ADD COLUMN superseded boolean NOT NULL DEFAULT false;

-- The host a machine's daemon runs on, with its pid: a daemon joining
-- under the name of a live machine is refused, unless that machine's
-- process is gone from the same host (store.JoinMachine).
ALTER TABLE machines ADD COLUMN host text NOT NULL DEFAULT '';
