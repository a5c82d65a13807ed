# Makefile for the libgeo C library and its command-line tools.
#
# Common targets:
#   make            build the static and shared libraries and tools
#   make test       build and run the unit tests
#   make install    install into $(PREFIX) (default /usr/local)

PROJECT    := libgeo
VERSION    := 1.6.2
PREFIX     ?= /usr/local
DESTDIR    ?=
BUILD_DIR  ?= build

CC         ?= cc
AR         ?= ar
INSTALL    ?= install
PKG_CONFIG ?= pkg-config

CFLAGS     ?= -O2 -g
CFLAGS     += -std=c11 -Wall -Wextra -Wpedantic -fPIC -Iinclude
CPPFLAGS   += -DGEO_VERSION=\"$(VERSION)\"
LDLIBS     += -lm

# Optional PROJ support, enabled when pkg-config can find it.
ifneq ($(shell $(PKG_CONFIG) --exists proj && echo yes),)
  CPPFLAGS += -DGEO_HAVE_PROJ $(shell $(PKG_CONFIG) --cflags proj)
  LDLIBS   += $(shell $(PKG_CONFIG) --libs proj)
endif

ifeq ($(DEBUG),1)
  CFLAGS := $(filter-out -O2,$(CFLAGS)) -O0 -fsanitize=address,undefined
  LDFLAGS += -fsanitize=address,undefined
endif

UNAME_S := $(shell uname -s)
ifeq ($(UNAME_S),Darwin)
  SHARED_EXT   := dylib
  SHARED_FLAGS := -dynamiclib -install_name $(PREFIX)/lib/$(PROJECT).$(SHARED_EXT)
else
  SHARED_EXT   := so
  SHARED_FLAGS := -shared -Wl,-soname,$(PROJECT).$(SHARED_EXT).1
endif

LIB_SRCS  := $(wildcard src/*.c)
LIB_OBJS  := $(patsubst src/%.c,$(BUILD_DIR)/obj/%.o,$(LIB_SRCS))
TOOL_SRCS := $(wildcard tools/*.c)
TOOLS     := $(patsubst tools/%.c,$(BUILD_DIR)/bin/%,$(TOOL_SRCS))
TEST_SRCS := $(wildcard tests/test_*.c)
TESTS     := $(patsubst tests/%.c,$(BUILD_DIR)/tests/%,$(TEST_SRCS))
DEPS      := $(LIB_OBJS:.o=.d)

STATIC_LIB := $(BUILD_DIR)/lib/$(PROJECT).a
SHARED_LIB := $(BUILD_DIR)/lib/$(PROJECT).$(SHARED_EXT)

.PHONY: all lib tools test check install uninstall clean distclean format dist help

all: lib tools

lib: $(STATIC_LIB) $(SHARED_LIB)

tools: $(TOOLS)

$(BUILD_DIR)/obj/%.o: src/%.c | $(BUILD_DIR)/obj
	$(CC) $(CPPFLAGS) $(CFLAGS) -MMD -MP -c $< -o $@

$(STATIC_LIB): $(LIB_OBJS) | $(BUILD_DIR)/lib
	$(AR) rcs $@ $^

$(SHARED_LIB): $(LIB_OBJS) | $(BUILD_DIR)/lib
	$(CC) $(SHARED_FLAGS) $(LDFLAGS) -o $@ $^ $(LDLIBS)

$(BUILD_DIR)/bin/%: tools/%.c $(STATIC_LIB) | $(BUILD_DIR)/bin
	$(CC) $(CPPFLAGS) $(CFLAGS) $(LDFLAGS) -o $@ $< $(STATIC_LIB) $(LDLIBS)

$(BUILD_DIR)/tests/%: tests/%.c $(STATIC_LIB) | $(BUILD_DIR)/tests
	$(CC) $(CPPFLAGS) $(CFLAGS) -Itests $(LDFLAGS) -o $@ $< $(STATIC_LIB) $(LDLIBS)

$(BUILD_DIR)/obj $(BUILD_DIR)/lib $(BUILD_DIR)/bin $(BUILD_DIR)/tests:
	@mkdir -p $@

test: $(TESTS)
	@failed=0; \
	for t in $(TESTS); do \
	  if $$t > $$t.log 2>&1; then \
	    echo "PASS $$(basename $$t)"; \
	  else \
	    echo "FAIL $$(basename $$t) (see $$t.log)"; failed=$$((failed + 1)); \
	  fi; \
	done; \
	test $$failed -eq 0

check: test

install: all
	$(INSTALL) -d $(DESTDIR)$(PREFIX)/lib $(DESTDIR)$(PREFIX)/include/geo $(DESTDIR)$(PREFIX)/bin
	$(INSTALL) -m 644 $(STATIC_LIB) $(DESTDIR)$(PREFIX)/lib/
	$(INSTALL) -m 755 $(SHARED_LIB) $(DESTDIR)$(PREFIX)/lib/
	$(INSTALL) -m 644 include/geo/*.h $(DESTDIR)$(PREFIX)/include/geo/
	$(INSTALL) -m 755 $(TOOLS) $(DESTDIR)$(PREFIX)/bin/

uninstall:
	rm -f $(DESTDIR)$(PREFIX)/lib/$(PROJECT).*
	rm -rf $(DESTDIR)$(PREFIX)/include/geo
	rm -f $(addprefix $(DESTDIR)$(PREFIX)/bin/,$(notdir $(TOOLS)))

format:
	clang-format -i $(LIB_SRCS) $(TOOL_SRCS) $(TEST_SRCS) include/geo/*.h

dist: clean
	git archive --format=tar.gz --prefix=$(PROJECT)-$(VERSION)/ -o $(PROJECT)-$(VERSION).tar.gz HEAD

clean:
	rm -rf $(BUILD_DIR)

distclean: clean
	rm -f $(PROJECT)-*.tar.gz compile_commands.json

help:
	@echo "Targets: all lib tools test install uninstall format dist clean"
	@echo "Variables: PREFIX=$(PREFIX) DEBUG=$(DEBUG) CC=$(CC)"

-include $(DEPS)
