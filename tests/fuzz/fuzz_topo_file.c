/*
 * fuzz_topo_file.c - RCOLL_TOPO_FILE as the library reads it (rcoll_topo_load_file): the
 * file read, the choice of reader by the first character and XML root element, and the
 * reader; where hwloc is built in, <topology> files go through hwloc's XML import and
 * rcoll's walk of the hwloc tree (topo_hwloc.c).  The seeds are hwloc XML.  Leaks inside
 * hwloc and libxml2 are theirs (tests/fuzz/lsan.supp).
 * Input: the file's bytes (written to a memfd, read through /proc/self/fd).
 */
#include <dlfcn.h>
#include <sys/mman.h>
#include <unistd.h>

#include "fuzz_topo.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static int fd = -1;
    static char path[64];
    if (fd < 0) {
        setenv("HWLOC_HIDE_ERRORS", "1", 1);
        /* hwloc loads its libxml2 plugin per topology and unloads it after: kept loaded, a
         * leak inside it keeps its module's name, which tests/fuzz/lsan.supp matches. */
        dlopen("libxml2.so.2", RTLD_NOW | RTLD_NODELETE);
        dlopen("/usr/lib/x86_64-linux-gnu/hwloc/hwloc_xml_libxml.so", RTLD_NOW | RTLD_NODELETE);
        fd = memfd_create("rcoll-fuzz-topo", MFD_CLOEXEC);
        if (fd < 0) abort();
        snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
    }
    if (ftruncate(fd, 0) != 0 || pwrite(fd, data, size, 0) != (ssize_t)size) abort();
    rcoll_topo_t *t = NULL;
    if (rcoll_topo_load_file(path, &t) == RCOLL_OK) {
        fuzz_topo_use(t);
        rcoll_topo_free(t);
    }
    return 0;
}
