"""The tasks of the suite: one sub-package per task (roles, task loaders, rewards, the env class)."""
