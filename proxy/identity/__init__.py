"""Who is calling: the identity a verified token carries, and the verification of tokens."""
