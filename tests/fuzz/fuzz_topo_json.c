/*
 * fuzz_topo_json.c - rcoll's own topology files (RCOLL_TOPO_FILE, rcoll JSON): the JSON
 * parser (topo_json.c), then the schema reader and the graph's checks (topo_file.c,
 * topo_finalize), then everything the library asks of an accepted graph.
 * Input: the file's text.
 */
#include "fuzz_topo.h"

#include "topo/topo_int.h"
#include "topo/topo_json.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* A copy of exactly the input's size: the parsers must not read past len. */
    char *text = malloc(size ? size : 1);
    memcpy(text, data, size);
    json_doc_t *doc = NULL;
    if (json_parse("fuzz", text, size, &doc) == RCOLL_OK) {
        FZ_ASSERT(json_doc_root(doc) != NULL);
        json_doc_free(doc);
    }
    rcoll_topo_t *t = NULL;
    if (topo_load_json("fuzz.json", text, size, &t) == RCOLL_OK) {
        fuzz_topo_use(t);
        rcoll_topo_free(t);
    }
    free(text);
    return 0;
}
