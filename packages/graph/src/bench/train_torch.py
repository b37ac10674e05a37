# PyTorch side of train-bench: the same Llama training step (forward, backward, AdamW) in eager fp32 with
# TF32 off, HF transformers' LlamaForCausalLM. Prints one JSON object per attention implementation; with --mp
# also SDPA under bf16 autocast (fp32 master weights, as train-bench --mp f16 keeps them).
import json, sys, time, torch
from transformers import LlamaConfig, LlamaForCausalLM

torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False
quick = '--quick' in sys.argv
c = dict(vocab=512, hidden=64, inter=176, layers=2, heads=4, batch=2, seq=32) if quick else \
    dict(vocab=8192, hidden=512, inter=1376, layers=8, heads=8, batch=16, seq=256)
steps = 3 if quick else 10
runs = [('eager', None), ('sdpa', None)] + ([('sdpa', torch.bfloat16)] if '--mp' in sys.argv else [])
for attn, amp in runs:
    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=c['vocab'], hidden_size=c['hidden'], intermediate_size=c['inter'],
                      num_hidden_layers=c['layers'], num_attention_heads=c['heads'], num_key_value_heads=c['heads'],
                      max_position_embeddings=max(2048, c['seq']), rms_norm_eps=1e-5, attn_implementation=attn)
    model = LlamaForCausalLM(cfg).cuda().float()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, betas=(0.9, 0.95), weight_decay=0.1)
    n = c['batch'] * c['seq']
    ids = (torch.arange(n, device='cuda') * 7919 + 13) % c['vocab']
    ids = ids.view(c['batch'], c['seq'])
    def step():
        opt.zero_grad(set_to_none=True)
        with torch.autocast('cuda', dtype=amp, enabled=amp is not None):
            loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
        opt.step()
        return loss
    for _ in range(3): step()
    torch.cuda.synchronize(); torch.cuda.reset_peak_memory_stats()
    t0 = time.perf_counter()
    for _ in range(steps): loss = step()
    torch.cuda.synchronize()
    ms = (time.perf_counter() - t0) / steps * 1000
    print(json.dumps(dict(bench='llama-train-step-torch', attn=attn, amp=str(amp).replace('torch.', '') if amp else 'no', device=torch.cuda.get_device_name(),
                          torch=torch.__version__, config=c, stepMs=ms, tokensPerSecond=n / ms * 1000,
                          peakBytes=torch.cuda.max_memory_allocated(), loss=float(loss))))
    del model, opt; torch.cuda.empty_cache()
