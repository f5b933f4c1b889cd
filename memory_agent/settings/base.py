"""What every settings group shares: the MEMORY_AGENT_ prefix, the bound on durations, and errors that name the
environment variable of each bad setting."""

from __future__ import annotations

from typing import Any, Self

from pydantic import BeforeValidator, ValidationError
from pydantic_settings import BaseSettings, SettingsConfigDict

from memory_agent.errors import ConfigurationError

ENV_PREFIX = "MEMORY_AGENT_"
# Durations are sent to PostgreSQL as integer seconds (int4) and to timers: a year is the most that means anything.
MAX_SECONDS = 365 * 24 * 3600
ERRORS_HEADER = "invalid memory_agent settings:"


class SettingsGroup(BaseSettings):
    """A group of settings one package reads. Each field is read from the environment variable named by the
    group's prefix and the field's name (MEMORY_AGENT_<FIELD> unless the group's prefix says more); a keyword
    argument wins over the environment."""

    model_config = SettingsConfigDict(env_prefix=ENV_PREFIX, extra="forbid", frozen=True)

    def __init__(self, **values: Any) -> None:
        try:
            super().__init__(**values)
        except ValidationError as exc:
            raise ConfigurationError(ERRORS_HEADER + "\n  " + "\n  ".join(problems(type(self), exc))) from None

    def replace(self, **values: Any) -> Self:
        """This group with some settings changed, checked as when it was built."""
        return type(self)(**{**self.model_dump(), **values})

    @classmethod
    def env_name(cls, field: str) -> str:
        return (str(cls.model_config.get("env_prefix", "")) + field).upper()


def lower_case(value: Any) -> Any:
    return value.strip().lower() if isinstance(value, str) else value


# Mode settings are case-insensitive, as environment names are: `Annotated[Literal[...], CASE_INSENSITIVE]`.
CASE_INSENSITIVE = BeforeValidator(lower_case)


def problems(group: type[SettingsGroup], error: ValidationError) -> list[str]:
    """One line per bad setting, naming its environment variable, the value given and what is allowed."""
    lines = []
    for item in error.errors():
        field = str(item["loc"][0]) if item["loc"] else ""
        message = item["msg"].removeprefix("Value error, ")
        if not field:  # a rule across settings names its variables itself
            lines.append(message)
        elif item["type"] == "extra_forbidden":
            lines.append(f"{field}: not a setting of {group.__name__}")
        else:
            lines.append(f"{group.env_name(field)} (got {item.get('input')!r}): {message}")
    return lines


def problems_of(error: ConfigurationError) -> list[str]:
    """The lines of a settings error raised by a group (to report the problems of every group at once)."""
    return [line.strip() for line in str(error).splitlines()[1:]]
