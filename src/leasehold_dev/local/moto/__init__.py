"""The local stack's moto: the embedded server (server), the process it runs in (process), its
journal on disk (durable), and the patches that make moto behave and cost as DynamoDB does
(transactions, queries, expressions, serialization, serving, text, item_size, index_lag). Each
patch mirrors the pinned moto release and refuses any other. Imported by the local stack and the
tests, never by a Lambda handler."""
