def main() -> None:
    raise SystemExit("cli coming")
