/*
 * fuzz_topo_nccl_xml.c - NCCL topology XML (NCCL_TOPO_DUMP_FILE's format, read through
 * RCOLL_TOPO_FILE): the XML well-formedness check and reader (topo_xml.c), the NCCL schema
 * (<system>, <cpu>, <pci>, <gpu>, <nvlink>, <nic>), then everything the library asks of an
 * accepted graph.
 * Input: the file's text.
 */
#include "fuzz_topo.h"

#include "topo/topo_int.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = malloc(size ? size : 1);
    memcpy(text, data, size);
    char root[64];
    if (topo_xml_check("fuzz", text, size, root, sizeof(root)) == RCOLL_OK)
        FZ_ASSERT(memchr(root, '\0', sizeof(root)));
    rcoll_topo_t *t = NULL;
    if (topo_load_nccl_xml("fuzz.xml", text, size, &t) == RCOLL_OK) {
        fuzz_topo_use(t);
        rcoll_topo_free(t);
    }
    free(text);
    return 0;
}
