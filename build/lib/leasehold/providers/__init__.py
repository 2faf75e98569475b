"""Clients for external providers: the services whose calls have effects outside leasehold
(a charge, a message). Light on purpose: they run on the worker's Lambda path."""
