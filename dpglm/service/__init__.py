"""Running a private policy as a service (docs/service.md): checkpoint/restore and the state walker."""

from dpglm.service.checkpoint import CheckpointError, checkpoint_policy, restore_policy

__all__ = ["CheckpointError", "checkpoint_policy", "restore_policy"]
