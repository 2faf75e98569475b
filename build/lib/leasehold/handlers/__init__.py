"""Thin Lambda entry points: decorate, parse the event, call one service, map the result."""
