"""What tests share: markers and helpers that no test module owns."""
