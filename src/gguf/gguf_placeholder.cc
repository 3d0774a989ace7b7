// Replaced by the real reader/writer.
