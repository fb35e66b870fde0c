module gmpbench

go 1.19
