# The two commands of the README. Both install what is missing first (ffmpeg and PostgreSQL
# from apt, Node 24 from the npm registry into .node/, npm dependencies) and are idempotent.
SHELL := /bin/bash
.PHONY: start test setup bench

# scripts/setup.sh prints the PATH to use (Node 24 first when the system Node is older).
setup:
	@scripts/setup.sh >/dev/null

# The CLI itself rather than `npm start`: a start-up failure (a port in use) is then its one
# line, without npm's error report around it.
start:
	@P="$$(scripts/setup.sh)" && PATH="$$P" node bin/mediaplane.js start

test:
	@P="$$(scripts/setup.sh)" && PATH="$$P" npm test

bench:
	@P="$$(scripts/setup.sh)" && PATH="$$P" sh -c 'npm run bench:api && npm run bench:transcode && npm run bench:llm'
