"""A small builder for update and condition expressions with safe placeholders."""

from __future__ import annotations

from typing import Any

from leasehold.store.items import serialize


class Expression:
    """Collects SET / REMOVE / ADD / DELETE clauses and a condition, naming every attribute and
    value through placeholders (so reserved words like `state` are safe)."""

    def __init__(self) -> None:
        self.names: dict[str, str] = {}
        self.values: dict[str, Any] = {}
        self._sets: list[str] = []
        self._removes: list[str] = []
        self._adds: list[str] = []
        self._deletes: list[str] = []
        self._conditions: list[str] = []

    def name(self, attribute: str) -> str:
        placeholder = f"#{attribute}"
        self.names[placeholder] = attribute
        return placeholder

    def value(self, value: Any) -> str:
        placeholder = f":v{len(self.values)}"
        self.values[placeholder] = value if _is_attribute_value(value) else serialize(value)
        return placeholder

    def set(self, attribute: str, value: Any) -> Expression:
        self._sets.append(f"{self.name(attribute)} = {self.value(value)}")
        return self

    def key(self, map_key: str) -> str:
        """A placeholder for a map key that is not an attribute name (an operation id)."""
        for placeholder, name in self.names.items():
            if name == map_key and placeholder.startswith("#k"):
                return placeholder
        placeholder = f"#k{len(self.names)}"
        self.names[placeholder] = map_key
        return placeholder

    def set_entry(self, attribute: str, map_key: str, value: Any) -> Expression:
        """SET attribute.key = value (the map must exist)."""
        self._sets.append(f"{self.name(attribute)}.{self.key(map_key)} = {self.value(value)}")
        return self

    def set_attribute(self, name: str, value: Any) -> Expression:
        """SET one top-level attribute whose name is data (a job id on the slot item)."""
        self._sets.append(f"{self.key(name)} = {self.value(value)}")
        return self

    def remove_attribute(self, name: str) -> Expression:
        self._removes.append(self.key(name))
        return self

    def set_raw(self, attribute: str, expression: str) -> Expression:
        """SET attribute = <expression>; `{x}` in the expression is the attribute's placeholder."""
        self._sets.append(f"{self.name(attribute)} = {expression.format(x=self.name(attribute))}")
        return self

    def increment(self, attribute: str, by: int = 1) -> Expression:
        return self.set_raw(attribute, "{x} + " + self.value(by))

    def remove(self, *attributes: str) -> Expression:
        self._removes.extend(self.name(attribute) for attribute in attributes)
        return self

    def add_to_set(self, attribute: str, member: str) -> Expression:
        self._adds.append(f"{self.name(attribute)} {self.value({'SS': [member]})}")
        return self

    def delete_from_set(self, attribute: str, member: str) -> Expression:
        self._deletes.append(f"{self.name(attribute)} {self.value({'SS': [member]})}")
        return self

    def condition(self, text: str) -> Expression:
        """Add a condition clause (ANDed); it may use placeholders made with name()/value()."""
        self._conditions.append(f"({text})")
        return self

    def update_expression(self) -> str:
        parts = []
        if self._sets:
            parts.append("SET " + ", ".join(self._sets))
        if self._removes:
            parts.append("REMOVE " + ", ".join(self._removes))
        if self._adds:
            parts.append("ADD " + ", ".join(self._adds))
        if self._deletes:
            parts.append("DELETE " + ", ".join(self._deletes))
        return " ".join(parts)

    def condition_expression(self) -> str | None:
        return " AND ".join(self._conditions) or None

    def update_params(self, key: dict[str, Any]) -> dict[str, Any]:
        """UpdateItem parameters for `key` (the Table adds its name)."""
        params: dict[str, Any] = {
            "Key": key,
            "UpdateExpression": self.update_expression(),
        }
        condition = self.condition_expression()
        if condition:
            params["ConditionExpression"] = condition
        if self.names:
            params["ExpressionAttributeNames"] = self.names
        if self.values:
            params["ExpressionAttributeValues"] = self.values
        return params


def _is_attribute_value(value: Any) -> bool:
    return isinstance(value, dict) and len(value) == 1 and next(iter(value)) in {"SS", "NS"}
