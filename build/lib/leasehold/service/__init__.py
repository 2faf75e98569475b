"""Use cases in domain terms: accept, claim, run, cancel, approve, replay, sweep, relay."""
