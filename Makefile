# The two commands of the README. Both install what is missing first (ffmpeg and PostgreSQL
# from apt, Node 24 from the npm registry into .node/, npm dependencies) and are idempotent.
SHELL := /bin/bash
.PHONY: start test setup bench

setup:
	@scripts/setup.sh >/dev/null

start:
	@PATH="$$(scripts/setup.sh)" npm start

test:
	@PATH="$$(scripts/setup.sh)" npm test

bench:
	@PATH="$$(scripts/setup.sh)" sh -c 'npm run bench:api && npm run bench:transcode && npm run bench:llm'
