"""The kinds SDK behind the public names of `leasehold` (private: import from `leasehold`)."""
