"""Approvals bound to what will run: a held call's service prepares it, the approval shows it
and carries its hash, and the service executes only that (see proxy.core.binding.prepare)."""

from proxy.core.binding.prepare import approval_meta, prepare_held

__all__ = ["approval_meta", "prepare_held"]
