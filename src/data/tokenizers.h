/* tokenizers.h — private to src/data: the constructors that gptc_tokenizer_open dispatches to. */
#ifndef GPTC_DATA_TOKENIZERS_H
#define GPTC_DATA_TOKENIZERS_H

#include "data/data.h"

/* The byte tokenizer: ids 0..255 are the bytes, 256 is end-of-text; vocab 257. */
gptc_status gptc_tokenizer_byte_open(gptc_tokenizer **out);

#endif
