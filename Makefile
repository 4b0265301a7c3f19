# The two commands: `make run` and `make test`. Both set everything up on a fresh machine.
VENV   := .venv
PY     := $(VENV)/bin/python
# Development's lock (production's packages and the tools); the image installs prod.txt alone.
LOCK   := requirements/dev.txt
STAMP  := $(VENV)/.installed-$(shell cksum $(LOCK) | cut -d' ' -f1)

.PHONY: run test setup services lint lock migrations-check screenshots messages bench bench-quick bench-units rehearse

# Every package at its locked version, each checked against its locked hash.
$(STAMP): $(LOCK)
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install -q --require-hashes -r $(LOCK)
	rm -f $(VENV)/.installed-*
	touch $(STAMP)

services:
	scripts/ensure_services.sh

setup: $(STAMP) services
	$(PY) manage.py migrate --noinput

run: setup
	$(PY) manage.py seed_demo
	scripts/run_stack.sh

# The Redis-facing suites again, on a loopback Redis Cluster (3 masters, 3 replicas) that
# scripts/redis_cluster.py starts and stops, with Celery on RabbitMQ and the channel layer
# on the plain Redis; plus the master-failover test, which only runs there. The suites that kill
# no master run with Redis's own node timeout (15 s): with the failover test's 1 s, a master
# starved for a second on a loaded machine was failed over in the middle of a test.
CLUSTER_SUITES := tests/queueing tests/dashboard/test_login_throttle.py \
	tests/dashboard/test_metrics.py
CLUSTER_ENV := CELERY_BROKER_URL=amqp://guest:guest@127.0.0.1:5672// \
	CHANNELS_REDIS_URL=redis://127.0.0.1:6379/15

# Two pytest processes (pytest-xdist), each with its own test database, Redis prefix and
# channel prefix: most of the suite's time is spent waiting on the servers, workers, browsers
# and timers its tests start. The first stage took 24 min in one process on an idle machine
# and 14 min in two on a loaded one. The last stage (a master killed under the cluster,
# processes that count the cluster's work) runs alone.
PARALLEL := -n 2 --dist worksteal

# Lint and the migration checks first: they take seconds and fail most often.
test: setup
	$(MAKE) --no-print-directory lint migrations-check
	scripts/ensure_browser.sh
	scripts/ensure_rabbitmq.sh
	scripts/ensure_nginx.sh
	scripts/ensure_prometheus.sh
	scripts/ensure_gettext.sh
	scripts/ensure_node_shop.sh
	scripts/ensure_oidc_provider.sh
	$(PY) manage.py compilemessages --ignore=.venv -v0
	$(VENV)/bin/lint-imports --no-cache
	$(VENV)/bin/pytest $(PARALLEL)
	$(CLUSTER_ENV) $(PY) scripts/redis_cluster.py run --node-timeout-ms 15000 -- \
		$(VENV)/bin/pytest -q $(PARALLEL) -m "not processes" $(CLUSTER_SUITES)
	$(CLUSTER_ENV) $(PY) scripts/redis_cluster.py run -- $(VENV)/bin/pytest -q \
		tests/queueing/test_admission_processes.py tests/test_cluster_failover.py \
		tests/test_cluster_lanes.py \
		tests/test_run_on_cluster.py

lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

# Models and migrations agree, and no migration newer than scripts/migrations_baseline.txt
# would lock a busy table or break the release still running while it is applied
# (scripts/check_migrations.py; docs/operations.md, "Upgrades without downtime").
migrations-check: setup
	$(PY) manage.py makemigrations --check --dry-run
	$(PY) scripts/check_migrations.py

# requirements/prod.txt and dev.txt again from the .in files beside them, after a line there
# changed: every package the .in files need, down to the last dependency, pinned with the
# hashes of its published files, for the image's Linux and Python 3.11. What is already locked
# stays at its version unless an .in file asks for another (`make lock LOCK_ARGS=--upgrade`
# moves every dependency to its newest; `LOCK_ARGS=--offline` resolves from uv's cache alone,
# which knows only the packages it has already fetched). dev.txt keeps prod.txt's versions.
LOCK_FLAGS := --generate-hashes --python-version 3.11.7 --python-platform linux \
	--custom-compile-command "make lock" --quiet
lock: $(STAMP)
	$(VENV)/bin/uv pip compile requirements/prod.in -o requirements/prod.txt $(LOCK_FLAGS) $(LOCK_ARGS)
	$(VENV)/bin/uv pip compile requirements/dev.in -o requirements/dev.txt $(LOCK_FLAGS) $(LOCK_ARGS)

# Every translatable string of the code into locale/<lang>/LC_MESSAGES/{django,djangojs}.po for
# every language there (a new one: `manage.py makemessages -l <code>` once), keeping the
# translations (msgmerge): new strings arrive with an empty msgstr, changed ones as fuzzy;
# translate them, then run this again (it also compiles). tests/test_translations.py fails until the fans' strings are done (README "Languages").
MESSAGE_IGNORE := --ignore=.venv --ignore=staticfiles --ignore=tests --ignore=bench --ignore=node_modules
messages: $(STAMP)
	scripts/ensure_gettext.sh
	$(PY) manage.py makemessages --all $(MESSAGE_IGNORE) --no-obsolete --add-location=file
	$(PY) manage.py makemessages -d djangojs --all $(MESSAGE_IGNORE) --no-obsolete --add-location=file
	$(PY) manage.py compilemessages --ignore=.venv -v0

# Re-take the screenshots kept in docs/ (from the real-browser tests).
screenshots: setup
	WR_SAVE_SCREENSHOTS=1 $(VENV)/bin/pytest -q tests/queueing/web/test_waiting_page.py tests/queueing/web/test_languages_browser.py \
		tests/queueing/web/test_your_turn_browser.py tests/queueing/web/test_place_links_browser.py \
		tests/queueing/web/test_branded_page_browser.py tests/dashboard/test_report_browser.py tests/dashboard/test_preview_browser.py tests/dashboard/test_dashboard_browser.py tests/dashboard/test_catalogue_browser.py

# The benchmark (docs/benchmarks.md); bench-quick is the under-two-minutes version for
# checking hot-path changes before committing. Neither is run by CI.
bench: setup
	$(PY) bench/run.py
	$(PY) rehearsal/run.py --benchmarks

bench-quick: setup
	$(PY) bench/run.py --quick

# Synthetic fans through the real room, scenario by scenario (rehearsal/scenarios.py): how
# well the wait quoted at join held. .run/rehearsal/results.json and report.html; about ten
# minutes. `make rehearse ARGS="--scenario steady --scale 0.5"` for one, smaller.
rehearse: setup
	$(PY) rehearsal/run.py $(ARGS)

# Per-operation costs for the capacity plan (docs/scaling.md): bench/unit_costs.json, about
# four minutes; `$(PY) bench/capacity_plan.py` then turns them into machines.
bench-units: setup
	$(PY) bench/unit_costs.py
