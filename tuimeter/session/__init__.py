"""Session files: CSV writer/reader, recorder, markers, reports (never imports the UI)."""
