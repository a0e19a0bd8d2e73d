"""The wallet's own tool error codes (a sender's lock held past the deadline is the shared
busy). A transaction refused or failed after it was kept records its code with it
(nonce_replayed, nonce_unavailable, tx_rejected) and answers it on every retry."""

from __future__ import annotations

from services.sdk.errors import ToolError


class InvalidAddress(ToolError):
    """A mixed-case address that fails its EIP-55 checksum."""

    code = "invalid_address"


class WrongChain(ToolError):
    """The call names another chain than the wallet's."""

    code = "wrong_chain"


class TxWouldFail(ToolError):
    """The node's gas estimate says the transaction would revert."""

    code = "tx_would_fail"


class ChainUnavailable(ToolError):
    """The chain's node cannot be reached, or refused to answer (nothing was sent)."""

    code = "chain_unavailable"


class NoWallet(ToolError):
    """The team has no key in the wallet."""

    code = "no_wallet"


class TxMismatch(ToolError):
    """The call's transaction is not the one prepared, or not the one approved."""

    code = "tx_mismatch"


class TxNotPrepared(ToolError):
    code = "tx_not_prepared"


class TxNotApproved(ToolError):
    """Neither a per-call approval nor a standing one covers the call."""

    code = "tx_not_approved"


class TxSubmissionUnknown(ToolError):
    """Signed, but the node never confirmed taking it; a retry re-sends the same bytes."""

    code = "tx_submission_unknown"


class TxReverted(ToolError):
    code = "tx_reverted"


class TxFailed(ToolError):
    """A kept transaction that was refused or failed: raised with the code it was recorded
    with (one of the three below), tx_failed when none was."""

    code = "tx_failed"


class NonceReplayed(ToolError):
    """The approved transaction's nonce was used by another (it can no longer be sent)."""

    code = "nonce_replayed"


class NonceUnavailable(ToolError):
    """The approved transaction's nonce is ahead of the chain's."""

    code = "nonce_unavailable"


class TxRejected(ToolError):
    """The node refused the signed transaction."""

    code = "tx_rejected"
