"""Reads a Prometheus text exposition (the file named by the first argument) with the
official prometheus_client parser and prints its metric families as JSON: code we did not
write reading hookd's /metrics (crates/hookd/tests/observability.rs)."""

import json
import sys

from prometheus_client.parser import text_string_to_metric_families


def main() -> None:
    with open(sys.argv[1], encoding="utf-8") as exposition:
        text = exposition.read()
    families = [
        {
            "name": family.name,
            "type": family.type,
            "samples": [
                {"name": s.name, "labels": s.labels, "value": s.value}
                for s in family.samples
            ],
        }
        for family in text_string_to_metric_families(text)
    ]
    json.dump(families, sys.stdout)


if __name__ == "__main__":
    main()
