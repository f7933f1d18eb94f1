#!/usr/bin/env python3
"""Hand-run check of kernels/cuda/attention_fa2.cu's fragment bookkeeping, without a GPU.

Emulates one CTA of attention_fa2_kernel (4 warps x 16 query rows, 64-key tiles) lane by lane
with ldmatrix (.x4, .trans) and mma.sync.m16n8k16 written from the PTX ISA's fragment
definitions, using the kernel's own shared-memory addresses, masks and online-softmax steps, and
compares the outputs and log-sum-exp with a naive causal softmax in double. It checks that the
kernel's addressing agrees with those definitions; it does not model the cp.async pipeline or
barriers (the conformance test does, on a GPU). Standard library only; about a second.

usage: python3 tests/kernels/fa2_fragment_emulation.py
"""
import math, random
random.seed(3)
HD=64; BR=64; BC=64; LD=HD+8
def bf(x):  # round to bf16
    import struct
    u=struct.unpack('<I',struct.pack('<f',x))[0]
    u=(u+(((u>>16)&1)+0x7FFF))>>16<<16
    return struct.unpack('<f',struct.pack('<I',u&0xFFFFFFFF))[0]
def ldm_x4(smem, addr_of_lane, trans=False):
    # smem: dict (row_index_flat) -> value via flat element index; addr_of_lane(l)-> flat elem index of row start
    regs=[[None]*4 for _ in range(32)]
    for mi in range(4):
        rows=[addr_of_lane(mi*8+r) for r in range(8)]
        M=[[smem[rows[r]+c] for c in range(8)] for r in range(8)]
        for lane in range(32):
            g,t=lane>>2,lane&3
            if not trans: regs[lane][mi]=(M[g][2*t],M[g][2*t+1])
            else: regs[lane][mi]=(M[2*t][g],M[2*t+1][g])
    return regs
def mma(d,a,b0,b1):  # per-warp: d[lane][4], a[lane][4 pairs], b0/b1[lane] pairs
    A=[[0]*16 for _ in range(16)]; B=[[0]*8 for _ in range(16)]
    for lane in range(32):
        g,t=lane>>2,lane&3
        A[g][2*t],A[g][2*t+1]=a[lane][0]; A[g+8][2*t],A[g+8][2*t+1]=a[lane][1]
        A[g][2*t+8],A[g][2*t+9]=a[lane][2]; A[g+8][2*t+8],A[g+8][2*t+9]=a[lane][3]
        B[2*t][g],B[2*t+1][g]=b0[lane]; B[2*t+8][g],B[2*t+9][g]=b1[lane]
    for lane in range(32):
        g,t=lane>>2,lane&3
        for e in range(4):
            r=g+8*(e>>1); c=2*t+(e&1)
            d[lane][e]+=sum(A[r][k]*B[k][c] for k in range(16))
def run(tq,tk,tile,scale):
    offset=tk-tq
    Q=[[bf(random.gauss(0,1)) for _ in range(HD)] for _ in range(tq)]
    K=[[bf(random.gauss(0,1)) for _ in range(HD)] for _ in range(tk)]
    V=[[bf(random.gauss(0,1)) for _ in range(HD)] for _ in range(tk)]
    q0=tile*BR
    q_last=min(tq,q0+BR)-1; key_end=min(tk,offset+q_last+1)
    n_tiles=(key_end+BC-1)//BC if key_end>0 else 0
    qs={}
    for r in range(BR):
        for c in range(LD): qs[r*LD+c]=Q[q0+r][c] if (c<HD and q0+r<tq) else 0.0
    out={}
    for warp in range(4):
        o=[[[0.0]*4 for _ in range(HD//8)] for _ in range(32)]
        m=[[-math.inf]*2 for _ in range(32)]; l=[[0.0]*2 for _ in range(32)]
        qf=[ldm_x4(qs, lambda lane,kk=kk: (warp*16+(lane&15))*LD+kk*16+(lane>>4)*8) for kk in range(HD//16)]
        for n in range(n_tiles):
            k0=n*BC
            if q0+warp*16>=tq or k0>offset+q0+warp*16+15: continue
            ks={};vs={}
            for r in range(BC):
                for c in range(LD):
                    ks[r*LD+c]=K[k0+r][c] if (c<HD and k0+r<tk) else 0.0
                    vs[r*LD+c]=V[k0+r][c] if (c<HD and k0+r<tk) else 0.0
            s=[[[0.0]*4 for _ in range(BC//8)] for _ in range(32)]
            for kk in range(HD//16):
                for j in range(0,BC//8,2):
                    b=ldm_x4(ks, lambda lane: (j*8+(lane&7)+((lane>>4)<<3))*LD+kk*16+((lane>>3)&1)*8)
                    qa=[qf[kk][lane] for lane in range(32)]
                    dj=[s[lane][j] for lane in range(32)]; mma(dj,qa,[b[l][0] for l in range(32)],[b[l][1] for l in range(32)])
                    dj1=[s[lane][j+1] for lane in range(32)]; mma(dj1,qa,[b[l][2] for l in range(32)],[b[l][3] for l in range(32)])
            if k0+BC>min(tk,offset+q0+warp*16+1):
                for lane in range(32):
                    g,t=lane>>2,lane&3
                    for j in range(BC//8):
                        for e in range(4):
                            key=k0+j*8+2*t+(e&1); row=q0+warp*16+g+(e>>1)*8
                            if key>offset+row or key>=tk: s[lane][j][e]=-math.inf
            sl2=scale*1.4426950408889634
            corr=[[0,0] for _ in range(32)]
            for r in range(2):
                mx=[max([m[lane][r]]+[max(s[lane][j][2*r],s[lane][j][2*r+1]) for j in range(BC//8)]) for lane in range(32)]
                mx=[max(mx[(lane&~3)+i] for i in range(4)) for lane in range(32)]
                for lane in range(32):
                    base=0.0 if mx[lane]==-math.inf else mx[lane]*sl2
                    corr[lane][r]=0.0 if m[lane][r]==-math.inf else 2**(m[lane][r]*sl2-base)
                    sm=0
                    for j in range(BC//8):
                        for e in (2*r,2*r+1):
                            s[lane][j][e]=2**(s[lane][j][e]*sl2-base) if s[lane][j][e]!=-math.inf else 0.0
                            sm+=s[lane][j][e]
                    l[lane][r]=l[lane][r]*corr[lane][r]+sm; m[lane][r]=mx[lane]
            for lane in range(32):
                for j in range(HD//8):
                    o[lane][j][0]*=corr[lane][0];o[lane][j][1]*=corr[lane][0];o[lane][j][2]*=corr[lane][1];o[lane][j][3]*=corr[lane][1]
            for kk in range(BC//16):
                a=[((bf(s[l][2*kk][0]),bf(s[l][2*kk][1])),(bf(s[l][2*kk][2]),bf(s[l][2*kk][3])),(bf(s[l][2*kk+1][0]),bf(s[l][2*kk+1][1])),(bf(s[l][2*kk+1][2]),bf(s[l][2*kk+1][3]))) for l in range(32)]
                for j in range(0,HD//8,2):
                    b=ldm_x4(vs, lambda lane: (kk*16+(lane&7)+((lane>>3)&1)*8)*LD+j*8+(lane>>4)*8, trans=True)
                    dj=[o[lane][j] for lane in range(32)]; mma(dj,a,[b[x][0] for x in range(32)],[b[x][1] for x in range(32)])
                    dj1=[o[lane][j+1] for lane in range(32)]; mma(dj1,a,[b[x][2] for x in range(32)],[b[x][3] for x in range(32)])
        for r in range(2):
            L=[sum(l[(lane&~3)+i][r] for i in range(4)) for lane in range(32)]
            for lane in range(32):
                g,t=lane>>2,lane&3
                qi=q0+warp*16+g+8*r
                if qi>=tq: continue
                inv=1/L[lane] if L[lane]>0 else 0
                for j in range(HD//8):
                    out[(qi,j*8+2*t)]=o[lane][j][2*r]*inv; out[(qi,j*8+2*t+1)]=o[lane][j][2*r+1]*inv
                out[(qi,'lse')]=m[lane][r]*scale+math.log(L[lane]) if L[lane]>0 else -math.inf
    # naive
    err=0;den=0;lerr=0
    for qi in range(q0,min(tq,q0+BR)):
        sc=[sum(Q[qi][e]*K[j][e] for e in range(HD))*scale for j in range(offset+qi+1) if j<tk]
        if not sc: continue
        mx=max(sc); p=[math.exp(x-mx) for x in sc]; Z=sum(p)
        for d in range(HD):
            want=sum(p[j]*V[j][d] for j in range(len(sc)))/Z
            err+=(out[(qi,d)]-want)**2; den+=want**2
        lerr=max(lerr,abs(out[(qi,'lse')]-(mx+math.log(Z))))
    return math.sqrt(err/den), lerr
def main():
    global HD, LD
    worst = 0.0
    for hd, cases in ((64, [(70, 70, 1), (70, 70, 0), (20, 150, 0)]),
                      (128, [(200, 200, 3), (200, 200, 1), (1, 100, 0)])):
        HD, LD = hd, hd + 8
        for tq, tk, tile in cases:
            err, lse_err = run(tq, tk, tile, 1 / math.sqrt(HD))
            print(f"head_dim {hd} q {tq} k {tk} tile {tile}: relative error {err:.2e}, "
                  f"lse error {lse_err:.1e}")
            worst = max(worst, err, lse_err)
    ok = worst < 1e-2  # bf16 P, as on the GPU
    print("ok" if ok else "MISMATCH")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
