/* Function names from ELF symbol tables (symtab.h).
 *
 * /proc/self/maps gives each executable mapping of a file: its address
 * range and the file offset mapped at its start. A symbol's value is a
 * virtual address of its file; the program header that loads it says
 * which file offset holds that address, so an address in the process
 * becomes a symbol's by way of the file offset both share:
 *
 *     offset = addr - map.start + map.offset
 *     vaddr  = offset - phdr.p_offset + phdr.p_vaddr
 *
 * which holds for position-independent programs and libraries and for
 * fixed-address programs alike. .symtab has every function, static ones
 * too; a stripped file has only .dynsym, its exported ones. A symbol
 * covers [value, value + size); one of size 0 (hand-written assembly)
 * covers up to the next symbol.
 */
#include <elf.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "symtab.h"
#include "sys.h"

struct object {
	char path[512];
	const unsigned char *map; /* the whole file, read-only */
	size_t size;
	bool failed; /* not ELF, unreadable: no names */
};

struct range {
	uintptr_t start, end, offset;
	int obj; /* index into objs */
};

struct gmp__symtab {
	struct object *objs;
	int nobjs, capobjs;
	struct range *ranges;
	int nranges, capranges;
	gmp__arena *a;
};

static bool grow(gmp__arena *a, void **arr, int *cap, int n, size_t elem)
{
	if (n < *cap)
		return true;
	int ncap = *cap ? 2 * *cap : 16;
	void *na = gmp__arena_alloc(a, (size_t)ncap * elem);
	if (!na)
		return false;
	if (n)
		memcpy(na, *arr, (size_t)n * elem);
	*arr = na;
	*cap = ncap;
	return true;
}

static uintptr_t hex(const char **s)
{
	uintptr_t v = 0;
	for (;;) {
		char c = **s;
		unsigned d;
		if (c >= '0' && c <= '9')
			d = (unsigned)(c - '0');
		else if (c >= 'a' && c <= 'f')
			d = (unsigned)(c - 'a' + 10);
		else
			return v;
		v = v << 4 | d;
		(*s)++;
	}
}

/* One line of /proc/self/maps: "start-end perms offset dev inode path". */
static void add_line(gmp__symtab *t, const char *l)
{
	uintptr_t start = hex(&l);
	if (*l++ != '-')
		return;
	uintptr_t end = hex(&l);
	if (*l++ != ' ')
		return;
	if (l[2] != 'x') /* r-xp: only code has functions */
		return;
	l += 5;
	uintptr_t offset = hex(&l);
	for (int field = 0; field < 2; field++) { /* dev, inode */
		while (*l == ' ')
			l++;
		while (*l && *l != ' ')
			l++;
	}
	while (*l == ' ')
		l++;
	if (*l != '/')
		return; /* anonymous, [vdso], ... */
	int obj = -1;
	for (int i = 0; i < t->nobjs; i++)
		if (!strcmp(t->objs[i].path, l)) {
			obj = i;
			break;
		}
	if (obj < 0) {
		if (strlen(l) >= sizeof t->objs[0].path ||
		    !grow(t->a, (void **)&t->objs, &t->capobjs, t->nobjs,
			  sizeof *t->objs))
			return;
		obj = t->nobjs++;
		memset(&t->objs[obj], 0, sizeof t->objs[obj]);
		strcpy(t->objs[obj].path, l);
	}
	if (!grow(t->a, (void **)&t->ranges, &t->capranges, t->nranges,
		  sizeof *t->ranges))
		return;
	t->ranges[t->nranges++] = (struct range){ start, end, offset, obj };
}

gmp__symtab *gmp__symtab_load(gmp__arena *a)
{
	gmp__symtab *t = gmp__arena_alloc(a, sizeof *t);
	if (!t)
		return NULL;
	memset(t, 0, sizeof *t);
	t->a = a;
	int fd = gmp__sys_open("/proc/self/maps", O_RDONLY | O_CLOEXEC, 0);
	if (fd < 0)
		return NULL;
	char buf[4096], line[1024];
	size_t ll = 0;
	for (;;) {
		ssize_t r = gmp__sys_read(fd, buf, sizeof buf);
		if (r == -EINTR)
			continue;
		if (r <= 0)
			break;
		for (ssize_t i = 0; i < r; i++) {
			if (buf[i] == '\n') {
				line[ll] = 0;
				add_line(t, line);
				ll = 0;
			} else if (ll < sizeof line - 1) {
				line[ll++] = buf[i];
			}
		}
	}
	gmp__sys_close(fd);
	return t;
}

static bool obj_map(struct object *o)
{
	if (o->map || o->failed)
		return o->map != NULL;
	o->failed = true;
	int fd = gmp__sys_open(o->path, O_RDONLY | O_CLOEXEC, 0);
	if (fd < 0)
		return false;
	struct stat st;
	if (fstat(fd, &st) != 0 || st.st_size < (off_t)sizeof(Elf64_Ehdr)) {
		gmp__sys_close(fd);
		return false;
	}
	void *m = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
	gmp__sys_close(fd);
	if (m == MAP_FAILED)
		return false;
	const Elf64_Ehdr *eh = m;
	if (memcmp(eh->e_ident, ELFMAG, SELFMAG) != 0 ||
	    eh->e_ident[EI_CLASS] != ELFCLASS64 ||
	    eh->e_shoff + (uint64_t)eh->e_shnum * sizeof(Elf64_Shdr) >
		    (uint64_t)st.st_size ||
	    eh->e_phoff + (uint64_t)eh->e_phnum * sizeof(Elf64_Phdr) >
		    (uint64_t)st.st_size) {
		munmap(m, (size_t)st.st_size);
		return false;
	}
	o->map = m;
	o->size = (size_t)st.st_size;
	o->failed = false;
	return true;
}

/* The file offset's virtual address, by the loading program header. */
static bool offset_to_vaddr(const struct object *o, uint64_t off,
			    uint64_t *vaddr)
{
	const Elf64_Ehdr *eh = (const Elf64_Ehdr *)o->map;
	const Elf64_Phdr *ph = (const Elf64_Phdr *)(o->map + eh->e_phoff);
	for (int i = 0; i < eh->e_phnum; i++)
		if (ph[i].p_type == PT_LOAD && off >= ph[i].p_offset &&
		    off < ph[i].p_offset + ph[i].p_filesz) {
			*vaddr = off - ph[i].p_offset + ph[i].p_vaddr;
			return true;
		}
	return false;
}

/* The best function symbol for vaddr in one symbol table section. */
static const char *search(const struct object *o, const Elf64_Shdr *sh,
			  uint64_t vaddr, uint64_t *best)
{
	const Elf64_Ehdr *eh = (const Elf64_Ehdr *)o->map;
	const Elf64_Shdr *shs = (const Elf64_Shdr *)(o->map + eh->e_shoff);
	if (sh->sh_link >= eh->e_shnum || sh->sh_entsize != sizeof(Elf64_Sym) ||
	    sh->sh_offset + sh->sh_size > o->size)
		return NULL;
	const Elf64_Shdr *strs = &shs[sh->sh_link];
	if (strs->sh_offset + strs->sh_size > o->size)
		return NULL;
	const char *strtab = (const char *)o->map + strs->sh_offset;
	const Elf64_Sym *syms = (const Elf64_Sym *)(o->map + sh->sh_offset);
	size_t n = sh->sh_size / sizeof(Elf64_Sym);
	const char *name = NULL;
	uint64_t bestv = 0;
	bool exact = false;
	for (size_t i = 0; i < n; i++) {
		const Elf64_Sym *s = &syms[i];
		if (ELF64_ST_TYPE(s->st_info) != STT_FUNC || !s->st_value ||
		    s->st_name >= strs->sh_size || s->st_value > vaddr)
			continue;
		bool inside = s->st_size && vaddr < s->st_value + s->st_size;
		if (s->st_size && !inside)
			continue;
		/* Prefer one whose size covers vaddr; else the nearest below
		 * of size 0. Among equals, the first (a global before its
		 * aliases). */
		if (!name || (inside && !exact) ||
		    (inside == exact && s->st_value > bestv)) {
			name = strtab + s->st_name;
			bestv = s->st_value;
			exact = inside;
		}
	}
	if (name)
		*best = bestv;
	return name;
}

const char *gmp__symtab_find(gmp__symtab *t, uintptr_t addr, uintptr_t *off)
{
	if (!t)
		return NULL;
	for (int i = 0; i < t->nranges; i++) {
		const struct range *r = &t->ranges[i];
		if (addr < r->start || addr >= r->end)
			continue;
		struct object *o = &t->objs[r->obj];
		if (!obj_map(o))
			return NULL;
		uint64_t vaddr;
		if (!offset_to_vaddr(o, addr - r->start + r->offset, &vaddr))
			return NULL;
		const Elf64_Ehdr *eh = (const Elf64_Ehdr *)o->map;
		const Elf64_Shdr *shs =
			(const Elf64_Shdr *)(o->map + eh->e_shoff);
		const char *name = NULL;
		uint64_t best = 0;
		for (int pass = 0; pass < 2 && !name; pass++) {
			uint32_t want = pass == 0 ? SHT_SYMTAB : SHT_DYNSYM;
			for (int s = 0; s < eh->e_shnum && !name; s++)
				if (shs[s].sh_type == want)
					name = search(o, &shs[s], vaddr, &best);
		}
		if (name && off)
			*off = (uintptr_t)(vaddr - best);
		return name;
	}
	return NULL;
}

void gmp__symtab_unload(gmp__symtab *t)
{
	if (!t)
		return;
	for (int i = 0; i < t->nobjs; i++)
		if (t->objs[i].map)
			munmap((void *)t->objs[i].map, t->objs[i].size);
}

void gmp__symbolize(uintptr_t addr, char *buf, size_t size)
{
	gmp__arena a = { 0 };
	gmp__symtab *t = gmp__symtab_load(&a);
	uintptr_t off = 0;
	const char *name = gmp__symtab_find(t, addr, &off);
	if (name && off)
		snprintf(buf, size, "%s+0x%lx", name, (unsigned long)off);
	else if (name)
		snprintf(buf, size, "%s", name);
	else
		snprintf(buf, size, "0x%lx", (unsigned long)addr);
	gmp__symtab_unload(t);
	gmp__arena_free(&a);
}
