"""Metric names the dashboard and alerts read. gridready_bench_* / gridready_serve_* are written by
gridready.bench.outputs; gridready_cert_* are the names the certification textfile writer is asked to use."""

# certification (textfile, one file per run, labels: customer, node, node_group, sku, gate, gpu, status)
CERT_NODE_CERTIFIED = "gridready_cert_node_certified"  # 1 certified, 0 not
CERT_GATE_STATUS = "gridready_cert_gate_status"  # 1 for the gate's status label (pass|warn|fail|error|skipped)
CERT_GATE_MEASURED = "gridready_cert_gate_measured"  # the measured value, label unit
CERT_QUARANTINED = "gridready_cert_quarantined"  # 1 when the node is on the quarantine list
CERT_LAST_RUN = "gridready_cert_last_run_timestamp_seconds"

# serving verification (textfile written by the serve stage / `invoke bench`)
BENCH_LATENCY = "gridready_bench_latency_seconds"  # labels level, metric (ttft|tpot|itl|e2e), quantile
BENCH_OUTPUT_TPS = "gridready_bench_output_tokens_per_second"
BENCH_RPS = "gridready_bench_requests_per_second"
BENCH_GOODPUT = "gridready_bench_goodput_ratio"
BENCH_SLO_PASS = "gridready_bench_slo_pass"
BENCH_LAST_RUN = "gridready_bench_last_run_timestamp_seconds"
SERVE_TIER_READY = "gridready_serve_tier_ready"
SERVE_GATE_PASS = "gridready_serve_gate_pass"

# engines (live, scraped)
VLLM = ("vllm:num_requests_running", "vllm:num_requests_waiting", "vllm:kv_cache_usage_perc",
        "vllm:generation_tokens_total", "vllm:prompt_tokens_total", "vllm:time_to_first_token_seconds",
        "vllm:inter_token_latency_seconds", "vllm:e2e_request_latency_seconds", "vllm:request_success_total")
TRITON = ("nv_inference_request_success", "nv_inference_request_failure", "nv_inference_count",
          "nv_inference_request_duration_us", "nv_inference_queue_duration_us", "nv_inference_pending_request_count",
          "nv_trt_llm_request_metrics", "nv_trt_llm_kv_cache_block_metrics")
DCGM = ("DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_POWER_USAGE", "DCGM_FI_DEV_GPU_TEMP",
        "DCGM_FI_DEV_XID_ERRORS")
