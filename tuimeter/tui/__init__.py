"""The Textual UI (imported only by the UI command)."""
