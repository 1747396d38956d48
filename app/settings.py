"""Service settings (environment variables prefixed TM_, or a .env file)."""

from __future__ import annotations

from pydantic_settings import BaseSettings, SettingsConfigDict


class Settings(BaseSettings):
    """Settings of the service. Storage defaults to an embedded store that needs no server."""

    model_config = SettingsConfigDict(env_prefix="TM_", env_file=".env", extra="ignore")

    host: str = "127.0.0.1"
    port: int = 8000
    storage: str = "memory"  # "memory", a journal file path (journal:PATH), or an SQLAlchemy URL
