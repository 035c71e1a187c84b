"""What tests share: model builders, oracles, markers and helpers that no test module owns."""
