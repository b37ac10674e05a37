export { Tokenizer, type DecodeOptions, type EncodeOptions, type Encoding, type SpecialTokenNames, type TokenizerOptions, type AddedToken } from './tokenizer';
export { BYTE_TO_CHAR, CHAR_TO_BYTE } from './byte-level';
export { ByteTokenizer, type ByteTokenizerOptions } from './byte-tokenizer';
