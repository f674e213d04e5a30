# Multi-pass BASS fidelity study (document 001 Fig 5.8, Table 3.1; docs/results/bwe.md §1,
# session 5). Not part of `make test` (a few minutes of CPU; the sim tests cover the code).
#
#   make bwe-bass-traffic-study   -> docs/results/bwe_bass_traffic_study.txt

CARGO ?= cargo
BWE_BASS_STREAMS ?= 3000

.PHONY: bwe-bass-traffic-study
bwe-bass-traffic-study:
	$(CARGO) run --release -p opsel --example bwe_bass_traffic_study -- $(BWE_BASS_STREAMS) \
	  | tee docs/results/bwe_bass_traffic_study.txt
