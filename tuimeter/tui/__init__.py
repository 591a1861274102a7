"""The live terminal UI (Textual). Imported only by the ``tuimeter`` UI command."""
