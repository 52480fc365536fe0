#!/usr/bin/env python3
"""Writes the hand-made non-streaming AIPerf fixtures from the recorded
AIPerf 0.8 run (aiperf-0.8-profile_export*.json[l]): what AIPerf's exporter
leaves out when `aiperf profile` runs without --streaming.

- The metrics flagged STREAMING_ONLY are not computed (AIPerf's
  base_metrics_processor.get_filters disallows them when
  endpoint.streaming is off): time_to_first_token, time_to_second_token,
  inter_token_latency, inter_chunk_latency, time_to_first_output_token,
  output_token_throughput_per_user, prefill_throughput_per_user.
- input_config holds only the options the user set (the exporter dumps it
  with exclude_unset): without --streaming, endpoint.streaming is absent,
  and so is --streaming in cli_command.
- A record's request_ack_ns is only set for streamed requests.

Every other number is the recording's, unchanged; the records still
give the summary's request_latency statistics."""
import json, pathlib

here = pathlib.Path(__file__).resolve().parent.parent
streaming_only = ["time_to_first_token", "time_to_second_token", "inter_token_latency", "inter_chunk_latency",
                  "time_to_first_output_token", "output_token_throughput_per_user", "prefill_throughput_per_user"]

summary = json.loads((here / "aiperf-0.8-profile_export_aiperf.json").read_text())
for k in streaming_only:
    summary.pop(k, None)
summary["input_config"]["endpoint"].pop("streaming")
summary["input_config"]["cli_command"] = summary["input_config"]["cli_command"].replace(" --streaming", "")
(here / "aiperf-0.8-nonstreaming-handmade-profile_export_aiperf.json").write_text(json.dumps(summary, indent=2))

lines = []
for line in (here / "aiperf-0.8-profile_export.jsonl").read_text().splitlines():
    rec = json.loads(line)
    rec["metadata"].pop("request_ack_ns", None)
    for k in streaming_only:
        rec["metrics"].pop(k, None)
    lines.append(json.dumps(rec, separators=(",", ":")))
(here / "aiperf-0.8-nonstreaming-handmade-profile_export.jsonl").write_text("\n".join(lines) + "\n")
