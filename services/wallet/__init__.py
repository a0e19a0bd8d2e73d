"""The wallet (category D `chain.transfer`, `chain.call`): the only holder of the teams' keys.
It prepares a transaction for governance to see, signs only the approved one, submits it once,
and reports the receipt. Agents and the proxy never see a key."""
