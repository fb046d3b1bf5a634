# Something to install: the release artifacts and a Debian package.
#
#   make dist       dist/: the stripped module named with its version, target
#                   and glibc requirement, functions/seckill.lua, LICENSE,
#                   SHA256SUMS
#   make deb        dist/redis-seckill_<version>-1_<arch>.deb (dpkg-deb, no
#                   debhelper): the module in /usr/lib/redis/modules/, 0755;
#                   its checksum joins SHA256SUMS
#   make install    the built module into $(DESTDIR)$(MODULE_DIR) (0755) and
#                   the library into $(DESTDIR)$(SHARE_DIR); make uninstall
#                   removes both
#   make deb-test   installs that .deb with dpkg, loads the module into
#                   Debian's redis-server started on a free port, checks
#                   MODULE LIST's ver, removes the package (part of make test;
#                   skips when not root or when the package is already there)
#   make docker-test  the Dockerfile's two targets built with podman over base
#                   images made here from Debian packages (no Docker Hub here),
#                   then each image's own server run from its files (chroot:
#                   containers cannot start here): MODULE LIST, a reservation,
#                   the module's mode. Not in make test (about 10 minutes the
#                   first time: three debootstraps and a cargo build); installs
#                   podman and debootstrap from Debian when missing
#
# One target triple: the host's (rustc -vV). The glibc requirement is the
# newest GLIBC_x.y symbol version the module imports (objdump -T), so a
# distribution with an older glibc knows before it tries.

DIST_DIR := $(CURDIR)/dist
VERSION = $(shell sed -n '/^\[package\]/,/^\[/s/^version *= *"\(.*\)"/\1/p' $(CURDIR)/Cargo.toml)
TARGET_TRIPLE = $(shell rustc -vV | sed -n 's/^host: //p')
DEB_ARCH = $(shell dpkg --print-architecture)
DEB_FILE = $(DIST_DIR)/redis-seckill_$(VERSION)-1_$(DEB_ARCH).deb
# The newest GLIBC_x.y the built module imports, e.g. 2.34.
glibc_of = $$(objdump -T $(1) | grep -o 'GLIBC_[0-9.]*' | sed 's/GLIBC_//' | sort -uV | tail -1)

EXTRA_TESTS += deb-test

.PHONY: dist deb deb-test docker-test install uninstall

# Where `make install` puts the files: Debian's module folder (the one its
# redis-server package documents) and the library beside the docs.
MODULE_DIR ?= /usr/lib/redis/modules
SHARE_DIR ?= /usr/share/redis-seckill
install: build ## the module into /usr/lib/redis/modules (0755) and seckill.lua into /usr/share/redis-seckill (DESTDIR=, MODULE_DIR=)
	install -D -m 0755 $(MODULE) $(DESTDIR)$(MODULE_DIR)/libredis_seckill.so
	install -D -m 0644 functions/seckill.lua $(DESTDIR)$(SHARE_DIR)/seckill.lua
	@echo "installed; load it with: loadmodule $(MODULE_DIR)/libredis_seckill.so (redis.conf)"

uninstall: ## remove what make install put there (same DESTDIR=, MODULE_DIR=)
	rm -f $(DESTDIR)$(MODULE_DIR)/libredis_seckill.so $(DESTDIR)$(SHARE_DIR)/seckill.lua
	-rmdir $(DESTDIR)$(SHARE_DIR) 2>/dev/null

dist: build ## dist/: stripped module (version, target, glibc in its name), seckill.lua, LICENSE, SHA256SUMS
	@set -e; glibc=$(call glibc_of,$(MODULE)); \
	name=libredis_seckill-$(VERSION)-$(TARGET_TRIPLE)-glibc$$glibc.so; \
	rm -rf $(DIST_DIR) && mkdir -p $(DIST_DIR); \
	strip --strip-debug --strip-unneeded -o $(DIST_DIR)/$$name $(MODULE); chmod 0755 $(DIST_DIR)/$$name; \
	install -m 0644 functions/seckill.lua LICENSE $(DIST_DIR)/; \
	cd $(DIST_DIR) && sha256sum $$name seckill.lua LICENSE > SHA256SUMS; \
	echo "dist: $(DIST_DIR) (needs glibc >= $$glibc)"; ls -l $(DIST_DIR); cat SHA256SUMS

# The package tree is built under dist/deb-root and packed with root as owner
# (--root-owner-group), so it needs no fakeroot. libc6's minimum is the glibc
# the module needs; redis-server's epoch 5 is Debian's.
deb: dist ## dist/redis-seckill_<version>-1_<arch>.deb: the module in /usr/lib/redis/modules/ (0755)
	@set -e; root=$(DIST_DIR)/deb-root; glibc=$(call glibc_of,$(MODULE)); \
	rm -rf $$root; \
	install -d -m 0755 $$root/DEBIAN $$root/usr/lib/redis/modules $$root/usr/share/doc/redis-seckill \
		$$root/usr/share/redis-seckill; \
	install -m 0755 $(DIST_DIR)/libredis_seckill-*.so $$root/usr/lib/redis/modules/libredis_seckill.so; \
	install -m 0644 functions/seckill.lua $$root/usr/share/redis-seckill/seckill.lua; \
	install -m 0644 LICENSE $$root/usr/share/doc/redis-seckill/copyright; \
	gzip -9n < CHANGELOG.md > $$root/usr/share/doc/redis-seckill/changelog.gz; \
	size=$$(du -sk --exclude=DEBIAN $$root | cut -f1); \
	printf '%s\n' "Package: redis-seckill" "Version: $(VERSION)-1" "Architecture: $(DEB_ARCH)" \
		"Maintainer: the redis-seckill authors" "Installed-Size: $$size" \
		"Depends: redis-server (>= 5:7.0), libc6 (>= $$glibc)" "Section: database" "Priority: optional" \
		"Description: flash-sale inventory as native Redis commands (module seckill)" \
		" Load it with 'loadmodule /usr/lib/redis/modules/libredis_seckill.so' in" \
		" /etc/redis/redis.conf and restart redis-server. The Functions library" \
		" for servers without modules is /usr/share/redis-seckill/seckill.lua." \
		> $$root/DEBIAN/control; \
	dpkg-deb --root-owner-group -Zxz --build $$root $(DEB_FILE) >/dev/null; rm -rf $$root; \
	cd $(DIST_DIR) && sha256sum $(notdir $(DEB_FILE)) >> SHA256SUMS; \
	dpkg-deb --info $(DEB_FILE) | sed -n '/Package:/,$$p'; dpkg-deb --contents $(DEB_FILE)

deb-test: deb ## install the .deb, load it into redis-server on a free port, check MODULE LIST, remove it
	@start=$$SECONDS; tools/deb-test.sh $(DEB_FILE) $(VERSION); rc=$$?; \
	case $$rc in \
	0) tools/test-summary.sh add deb-test redis-server 1 0 $$((SECONDS - start));; \
	77) tools/test-summary.sh add deb-test skipped 0 0 $$((SECONDS - start)); rc=0;; \
	*) tools/test-summary.sh add deb-test redis-server 0 1 $$((SECONDS - start));; \
	esac; exit $$rc

docker-test: ## build the Dockerfile's redis and valkey images with podman and run each image's server from its files
	@command -v podman >/dev/null && command -v debootstrap >/dev/null || \
		{ apt-get update -q && apt-get install -y -q podman debootstrap; }
	@tools/docker-test.sh $(VERSION)
