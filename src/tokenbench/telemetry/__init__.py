"""Engine and GPU telemetry beside the load: scrape /metrics and NVML in a child process on the
run's clock (sampler.py), map engine names to normalized fields (prom.py), and summarize samples
per load point and per time-series window (summary.py, pure); the client's own CPU and event-loop
lag while a point runs (client_monitor.py) and what they say of each point (client_health.py, pure)."""
