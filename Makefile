# sandbox: build, run and test. `make help` lists the targets.
BUILD    ?= build
CC       ?= gcc
SAN      ?=

WARN     = -Wall -Wextra -Werror -Wshadow -Wformat=2 -Wno-format-nonliteral \
           -Wstrict-prototypes -Wmissing-prototypes -Wvla
HARDEN   = -fstack-protector-strong -fstack-clash-protection -fcf-protection -fPIE
LDHARDEN = -pie -Wl,-z,relro,-z,now -Wl,-z,noexecstack
ifeq ($(SAN),1)
OPT      = -O1 -g -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=all
LDSAN    = -fsanitize=address,undefined
else
OPT      = -O2 -g -D_FORTIFY_SOURCE=3
LDSAN    =
endif
CFLAGS   = -std=c11 -D_GNU_SOURCE $(OPT) $(WARN) $(HARDEN)
LDFLAGS  = $(LDHARDEN) $(LDSAN)
PKGS     = json-c libpq libcrypto
PKG_CFLAGS := $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
PKG_LIBS   := $(shell pkg-config --libs $(PKGS) 2>/dev/null)
CFLAGS  += $(PKG_CFLAGS)

LIB_SRC  = $(wildcard lib/*.c)
API_SRC  = $(wildcard fcgi/*.c)
SUP_SRC  = $(wildcard runner/*.c)
CTL_SRC  = $(wildcard ctl/*.c)
UNIT_SRC = $(wildcard tests/unit/test_*.c)

LIB_OBJ  = $(LIB_SRC:%.c=$(BUILD)/obj/%.o)
API_OBJ  = $(API_SRC:%.c=$(BUILD)/obj/%.o)
SUP_OBJ  = $(SUP_SRC:%.c=$(BUILD)/obj/%.o)
CTL_OBJ  = $(CTL_SRC:%.c=$(BUILD)/obj/%.o)
UNITS    = $(UNIT_SRC:tests/unit/%.c=$(BUILD)/tests/%)

BINS = $(BUILD)/sandbox-api $(BUILD)/sandbox-supervisor $(BUILD)/sandboxctl \
       $(BUILD)/sandbox-init

.PHONY: all deps run stop test check unit bench images fuzz clean help
all: $(BINS) $(UNITS)

help:
	@echo "make deps    install the Debian packages the project needs (root)"
	@echo "make         build everything into $(BUILD)/"
	@echo "make run     set up and start the whole service (var/), print URL + key"
	@echo "make stop    stop what 'make run' started"
	@echo "make images  build the sandbox root filesystems (mmdebstrap) into images/"
	@echo "make test    the whole suite on a private stack (unit + integration)"
	@echo "make check   the same suite built with ASan+UBSan"
	@echo "make bench   run latency and throughput against bare crun"
	@echo "make fuzz    the libFuzzer targets (FUZZ_SECONDS each)"

deps:
	@sh scripts/deps.sh

$(BUILD)/obj/%.o: %.c $(wildcard lib/*.h fcgi/*.h runner/*.h)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -c $< -o $@

$(BUILD)/libsandbox.a: $(LIB_OBJ)
	ar rcs $@ $^

$(BUILD)/sandbox-api: $(API_OBJ) $(BUILD)/libsandbox.a
	$(CC) $(LDFLAGS) -o $@ $^ -lfcgi -larchive -lmagic $(PKG_LIBS)

$(BUILD)/sandbox-supervisor: $(SUP_OBJ) $(BUILD)/libsandbox.a
	$(CC) $(LDFLAGS) -o $@ $^ -lcurl $(PKG_LIBS)

$(BUILD)/sandboxctl: $(CTL_OBJ) $(BUILD)/libsandbox.a
	$(CC) $(LDFLAGS) -o $@ $^ $(PKG_LIBS)

# PID 1 inside every sandbox: static (the image may have no libc of the
# right version) and never sanitized (ASan cannot run as a static PID 1).
$(BUILD)/sandbox-init: runner/init/init.c
	@mkdir -p $(dir $@)
	$(CC) -std=c11 -D_GNU_SOURCE -O2 -D_FORTIFY_SOURCE=3 $(WARN) \
	  -fstack-protector-strong -fstack-clash-protection -static-pie -fPIE \
	  -Wl,-z,relro,-z,now -o $@ $<

$(BUILD)/tests/%: tests/unit/%.c $(BUILD)/libsandbox.a tests/unit/tap.h
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $< $(BUILD)/libsandbox.a $(PKG_LIBS)

images:
	@bash scripts/images.sh images

unit: $(UNITS)
	@for t in $(UNITS); do $$t || exit 1; done

run: deps all
	@sh scripts/dev.sh up

stop:
	@sh scripts/dev.sh down

test: deps
	@bash scripts/test.sh

check: deps
	@BUILD=build-san SAN=1 bash scripts/test.sh

# libFuzzer targets (clang): program output -> frames, query strings and
# configuration values, WebSocket upgrades and client frames, multipart
# bodies and workspace paths. `make fuzz FUZZ_SECONDS=300` for a longer run.
FUZZ_SECONDS ?= 10
FUZZ_CFLAGS = -std=c11 -D_GNU_SOURCE -g -O1 -Wall -Wextra -Werror -fsanitize=fuzzer,address,undefined $(PKG_CFLAGS)
$(BUILD)/fuzz/fuzz_frames: tests/fuzz/fuzz_frames.c runner/frames.c $(LIB_SRC)
	@mkdir -p $(dir $@)
	clang $(FUZZ_CFLAGS) -o $@ $^ $(PKG_LIBS)
$(BUILD)/fuzz/fuzz_query: tests/fuzz/fuzz_query.c fcgi/request.c $(LIB_SRC)
	@mkdir -p $(dir $@)
	clang $(FUZZ_CFLAGS) -o $@ $^ -lfcgi $(PKG_LIBS)
$(BUILD)/fuzz/fuzz_ws: tests/fuzz/fuzz_ws.c runner/ws.c lib/util.c
	@mkdir -p $(dir $@)
	clang $(FUZZ_CFLAGS) -o $@ $^ $(PKG_LIBS)
$(BUILD)/fuzz/fuzz_upload: tests/fuzz/fuzz_upload.c fcgi/multipart.c lib/wspath.c lib/util.c
	@mkdir -p $(dir $@)
	clang $(FUZZ_CFLAGS) -o $@ $^
fuzz: $(BUILD)/fuzz/fuzz_frames $(BUILD)/fuzz/fuzz_query $(BUILD)/fuzz/fuzz_ws $(BUILD)/fuzz/fuzz_upload
	@for f in $^; do echo "== $$f ($(FUZZ_SECONDS) s)"; \
	  mkdir -p $(BUILD)/fuzz/corpus-$$(basename $$f); \
	  $$f -max_total_time=$(FUZZ_SECONDS) -max_len=4096 $(BUILD)/fuzz/corpus-$$(basename $$f) 2>&1 | tail -n 2 || exit 1; done

bench: deps
	@bash scripts/bench.sh

clean:
	rm -rf build build-san
