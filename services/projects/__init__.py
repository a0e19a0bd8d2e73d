"""Category B projects: project.list, project.get (read), project.create, project.update
(write), with optimistic concurrency on updates (a stale expected_version is version_conflict)."""
