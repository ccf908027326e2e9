-- 010: every command an author gives is counted for the hourly limit, and
-- a job is found by the command that queued it, to say who may cancel it
-- (issue 36, items 3 and 4).

-- github_commands_by_login covers only the commands that queued a job
-- (the daily job limit); the hourly one counts refusals, status and
-- cancel too.
CREATE INDEX github_commands_by_author ON github_commands (login, at);
CREATE INDEX github_commands_by_job ON github_commands (repo, job_id) WHERE job_id IS NOT NULL;
