"""Analyses that passes, the interpreter and every back end share.

They read the IR and the instruction table's traits (``ttlc.ir.traits``) and change
nothing: ``effects`` (what memory an instruction accesses, and which accesses need
ordering), ``aliasing`` (which memrefs may share memory), ``uniformity`` (which values
vary per work-item) and ``gcd`` (divisors of integers, sizes, strides and alignments).  Import rule: analysis
imports ``ttlc.ir`` and ``ttlc.target`` only; passes, the interpreter and back ends
import analysis.
"""
