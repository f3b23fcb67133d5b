module climate

go 1.26.8
